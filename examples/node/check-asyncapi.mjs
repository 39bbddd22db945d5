// Parses and validates an AsyncAPI document with @asyncapi/parser (the version
// package-lock.json pins): prints each diagnostic, exits 1 when one is an error.
// Usage: node check-asyncapi.mjs FILE
import { readFile } from 'node:fs/promises';
import { Parser, fromFile } from '@asyncapi/parser';

const file = process.argv[2];
if (!file) {
  console.error('usage: node check-asyncapi.mjs FILE');
  process.exit(2);
}
await readFile(file); // a missing file is an error of its own, not a parser's diagnostic
const parser = new Parser();
const { document, diagnostics } = await fromFile(parser, file).parse();
let errors = 0;
for (const d of diagnostics) {
  const level = ['error', 'warning', 'info', 'hint'][d.severity] ?? String(d.severity);
  if (d.severity === 0) errors++;
  console.log(`${level}: ${d.code}: ${d.message} at ${d.path.join('.')}`);
}
if (errors > 0 || !document) {
  console.log(`${file}: ${errors} error(s)`);
  process.exit(1);
}
console.log(`${file}: valid AsyncAPI ${document.version()}, ${document.channels().length} channels, ${document.messages().length} messages`);
