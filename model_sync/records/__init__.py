"""The records model_sync writes to the bucket: their JSON Schemas (`schemas`), the one strict reader and
writer of each (`codec`), and the records built from parts (`version_manifest`, `canary_record`)."""
