// Validate Traefik custom resources against @kubernetes-models/traefik (the CRD schemas).
// Input (stdin): JSON list of manifests. Output (stdout): JSON list of
// {name, kind, error} for every manifest that fails; exit 0 either way, 2 on bad input.
import { readFileSync } from "node:fs";

const docs = JSON.parse(readFileSync(0, "utf8"));
const failures = [];
for (const doc of docs) {
  const [group, version] = doc.apiVersion.split("/");
  let mod;
  try {
    mod = await import(`@kubernetes-models/traefik/${group}/${version}/${doc.kind}`);
  } catch (e) {
    failures.push({ name: doc.metadata?.name, kind: doc.kind, error: `no model for ${doc.apiVersion} ${doc.kind}` });
    continue;
  }
  try {
    new mod[doc.kind](doc).validate();
  } catch (e) {
    failures.push({ name: doc.metadata?.name, kind: doc.kind, error: String(e.message ?? e).replace(/\s+/g, " ") });
  }
}
process.stdout.write(JSON.stringify(failures));
