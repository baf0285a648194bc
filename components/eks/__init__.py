"""EKS parts a component builds beside others: the managed add-ons (`addons`), which the cluster
installs before any node and __main__.py after the node groups."""
