"""The local environment behind `make demo`: the real tritonserver from the nvidia-pytriton wheel,
a persistent local S3 server (rclone serve s3), process supervision, and the demo itself."""
