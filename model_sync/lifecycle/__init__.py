"""A model's versions in one environment's bucket: pins, allocation and history (`catalog`), and the
commands that move them: `promote`, `rollback`, `prune`."""
