"""The records model_sync writes to the bucket: their JSON Schemas (`schemas`), the one strict reader and
writer of each (`codec`), the records built from parts (`version_manifest`, `canary_record`), the compatibility record a manifest and a
promotion carry (`compatibility`), and whether a manifest's version is servable (`servable`)."""
