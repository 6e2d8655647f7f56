// node:fs for webcrypto_interop.mjs in a browser: readFileSync over the files the page fetched.
export function readFileSync(path) {
  const text = globalThis.__interopFiles?.[path];
  if (text === undefined) throw new Error(`ENOENT: ${path} was not served to the page`);
  return text;
}
