"""IAM documents and names shared by the components: ARN shapes and the EKS access policies
(`arns`), GitHub Actions OIDC trust and GitHub's repository and ref shapes (`github_oidc`), the EKS
Pod Identity trust policy (`pod_identity`), what cross-account promotion reads (`promotion`), and the one
builder of a role with its managed policies (`roles`) and of a KMS key with its alias (`kms_keys`)."""
