"""A Triton model as files: its directory as `export` writes it and `push` reads it (`model_directory`)
and its config.pbtxt (`model_config`)."""
