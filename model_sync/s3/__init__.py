"""The S3 layer: one environment's bucket (`bucket`), botocore sessions and clients (`clients`), the
classification of S3 failures (`failures`), conditional writes (`conditional`), big-object transfers
(`transfer`) and their download direction (`download`)."""
