"""The platform on this machine: the real tritonserver from the nvidia-pytriton wheel (`runtime`), a
local S3 server (`s3server`: moto's, in memory, or rclone serve s3), process supervision (`procs`),
a deployment's replicas with their agents (`fleet`) and client traffic (`traffic`); on them, the
demo behind `make demo` (`demo`, `sample_model`) and the gray release's local lab (`canary_lab`,
with the scenario models of `canary_models` and `torchscript_models`)."""
