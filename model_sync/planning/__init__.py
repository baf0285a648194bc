"""`model-sync plan`: deployments proposed from each model's measured serving profile and declared demand."""
