"""What the serving replicas do with a version: their replica records (`replicas`), the `status` view,
`verify` and its smoke inference (`smoke`), and GPU memory planning (`gpu_memory`, `gpu_plan`)."""
