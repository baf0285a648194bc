"""IAM documents and names shared by the components: ARN shapes (`arns`), GitHub Actions OIDC trust
(`github_oidc`) and the EKS Pod Identity trust policy (`pod_identity`)."""
