"""The gray release (docs/architecture.md#gray-release): the run (`gray_release`), which replicas it uses
(`placement`), where its figures come from (`metrics`), how they are judged (`analysis`), how the CLI starts
one (`launch`) and how one is ended from outside its run (`ending`)."""
