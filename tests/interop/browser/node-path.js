// node:path for webcrypto_interop.mjs in a browser: join with "/".
export const join = (...parts) => parts.join("/").replace(/\/+/g, "/");
