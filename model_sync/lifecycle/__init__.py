"""The commands that move a model's versions between and within environments: `promote`,
`rollback`, `prune` (on the catalogue in model_sync/versions)."""
