"""The local environment behind `make demo`: the real tritonserver from the nvidia-pytriton wheel,
a local S3 server (moto's, in memory; rclone serve s3 for the tests that want it), process
supervision, and the demo itself."""
