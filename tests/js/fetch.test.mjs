// encryptedFetch against the real middleware: tests/test_browser_module.py serves
// examples/filedrop (EncryptionMiddleware on /sealed) under uvicorn and sets ECE_SERVER to
// "<base URL> <key hex> <key id>". Node's fetch streams uploads over HTTP/1.1, so both
// upload modes are checked here (Chromium streams them only over HTTP/2).
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { test } from "node:test";

import * as ece from "../../streamcrypt/web/ece.js";

const [base, keyHex, keyid] = (process.env.ECE_SERVER || "").split(" ");
const skip = base ? false : "ECE_SERVER not set (tests/test_browser_module.py sets it)";
const key = base ? new Uint8Array(Buffer.from(keyHex, "hex")) : null;
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

async function readAll(body) {
  const parts = [];
  for await (const part of body) parts.push(part);
  return Buffer.concat(parts);
}

test("uploads, buffered and streamed, reach the handler as the plaintext", { skip }, async () => {
  for (const upload of ["buffer", "stream"]) {
    for (const size of [0, 1, 65536 - 17, 3 << 20]) {
      const data = new Uint8Array(randomBytes(size));
      const progress = [];
      const response = await ece.encryptedFetch(`${base}/sealed/upload`, {
        key, keyid, method: "POST", body: data, upload, onUploadProgress: (n) => progress.push(n),
      });
      assert.equal(response.status, 200, `${upload} ${size}`);
      const answer = JSON.parse((await readAll(response.body)).toString());
      assert.deepEqual(answer, { sha256: sha256(data), bytes: size }, `${upload} ${size}`);
      if (size) assert.equal(progress.at(-1), size);
    }
  }
});

test("a streamed response is decrypted as it comes", { skip }, async () => {
  const size = 5 << 20;
  const seen = [];
  const response = await ece.encryptedFetch(`${base}/sealed/blob?size=${size}`, {
    key, keyid, onDownloadProgress: (n) => seen.push(n),
  });
  const body = await readAll(response.body);
  assert.equal(body.length, size);
  assert.equal(sha256(body), response.headers.get("X-Plain-SHA256"));
  assert.equal(response.headers.get("Content-Encoding"), null);
  assert.ok(seen.length > 10, "progress came record by record");
});

test("the wrong key, an unknown key id, a clear answer", { skip }, async () => {
  const wrong = await ece.encryptedFetch(`${base}/sealed/blob?size=100000`, { key: ece.generateKey() });
  await assert.rejects(readAll(wrong.body), ece.AuthenticationError);
  const unknown = await ece.encryptedFetch(`${base}/sealed/blob?size=10`, { key, decryptKey: { other: key } });
  await assert.rejects(readAll(unknown.body), ece.UnknownKeyError);
  // The server refuses a body under a key id it does not know (400, in clear).
  const refused = await ece.encryptedFetch(`${base}/sealed/upload`, { key, keyid: "nope", method: "POST", body: "x" });
  assert.equal(refused.status, 400);
  await assert.rejects(ece.encryptedFetch(`${base}/static/style.css`, { key }), ece.FormatError);
  const clear = await ece.encryptedFetch(`${base}/static/style.css`, { key, allowClear: true });
  assert.equal(clear.status, 200);
});
