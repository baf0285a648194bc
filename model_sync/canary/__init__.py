"""The gray release (docs/architecture.md#gray-release): the run (`gray_release`), its record as the
run holds it (`owned_record`), which replicas it uses (`placement`), where its figures come from
(`metrics`), how they are judged (`analysis`), how the CLI starts one (`launch`) and how one is
ended from outside its run (`ending`)."""
