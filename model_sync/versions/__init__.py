"""A model's versions in one environment's bucket: its pins, manifests, version allocation and pin
history (`catalog`), and the check every command runs before it pins a version (`pinnable`)."""
