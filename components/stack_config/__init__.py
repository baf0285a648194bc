"""The stack configuration: read once, validated, frozen.

The only place the program reads Pulumi config. `loading.load_from_pulumi()` collects every
`triton-platform:*` key (plus `aws:region`) and `parser.parse()` turns the raw values into a
frozen `model.StackConfig`, raising `errors.ConfigError` (one line) before any resource exists.

One module per concern, each importing only those listed before it:

- vocabulary: the names, choices and value shapes the components share with the parser
- errors: ConfigError
- readers: the field readers (integers, booleans, strings, choices, lists, CIDRs, mappings, YAML)
- declarations: every key with its type, default and bounds, as data; Pulumi.yaml's `config:`
  section is generated from it (`make pulumi-yaml`)
- model: the frozen StackConfig and its parts
- rules: the rules between keys and those of an environment (prod's above all)
- cluster, node_groups, triton_deployments, images, edge, delivery, observability: the keys of
  one area each, read with their own rules and the ones of rules.py that concern them
- parser: `parse()`, the whole stack in one pass
- loading: the stack from the Pulumi runtime, or from its stack file

Importers name the module (`from components.stack_config.vocabulary import ENVIRONMENTS`).
The components import only what lies below the parser (vocabulary, errors, readers, model),
never the parser above them (tests/test_imports.py holds both orders).
"""
