"""Every upstream chart, image and add-on version the platform deploys, pinned in one place (`versions`)."""
