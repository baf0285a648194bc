"""IAM documents and names shared by the components: ARN shapes and the EKS access policies
(`arns`), GitHub Actions OIDC trust and GitHub's repository and ref shapes (`github_oidc`), the EKS
Pod Identity trust policy (`pod_identity`) and what cross-account promotion reads (`promotion`)."""
