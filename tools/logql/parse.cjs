// Parses LogQL with Grafana's own grammar (@grafana/lezer-logql). Reads a JSON array of
// queries on stdin, writes a JSON array: for each query its error positions (lezer marks a
// syntax error with an error node, it never throws) and its syntax tree as nested
// [nodeName, text-or-children] lists. Used by tests/components/monitoring/test_log_queries.py.
"use strict";
const { parser } = require("@grafana/lezer-logql");

function walk(cursor, text) {
  const name = cursor.type.isError ? "⚠" : cursor.type.name;
  const kids = [];
  if (cursor.firstChild()) {
    do { kids.push(walk(cursor, text)); } while (cursor.nextSibling());
    cursor.parent();
  }
  return kids.length ? [name, kids] : [name, text.slice(cursor.from, cursor.to)];
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const out = JSON.parse(input).map((query) => {
    const tree = parser.parse(query);
    const errors = [];
    tree.iterate({ enter: (node) => { if (node.type.isError) errors.push(node.from); } });
    return { query, errors, tree: walk(tree.cursor(), query) };
  });
  process.stdout.write(JSON.stringify(out));
});
