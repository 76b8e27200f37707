// Types of streamcrypt/web/ece.js: RFC 8188 aes128gcm bodies over WebCrypto and WHATWG streams.

export declare const OVERHEAD: 17;
export declare const MIN_RECORD_SIZE: 18;
export declare const DEFAULT_RECORD_SIZE: number;
export declare const DEFAULT_MAX_RECORD_SIZE: number;
export declare const CONTENT_ENCODING: "aes128gcm";
export declare const KEY_SIZE: 16;

export declare class StreamCryptError extends Error {}
export declare class AuthenticationError extends StreamCryptError {}
export declare class TruncatedStreamError extends StreamCryptError {}
export declare class FormatError extends StreamCryptError {}
export declare class LimitExceededError extends StreamCryptError {}
export declare class UnknownKeyError extends StreamCryptError {}
export declare class InvalidParameterError extends StreamCryptError {}

/** 16 raw bytes of input keying material. */
export type Key = Uint8Array | ArrayBuffer;
/** How a decryptor finds its key: one key (the header's key id is ignored), a table by
 *  key id, or a function given the key id (null when it is not UTF-8) and its bytes. */
export type KeySource =
  | Key
  | Record<string, Key>
  | Map<string, Key>
  | ((keyid: string | null, raw: Uint8Array) => Key | null | undefined | Promise<Key | null | undefined>);
export type Chunk = Uint8Array | ArrayBuffer | ArrayBufferView | string;

export interface EncryptOptions {
  key: Key;
  /** The id of the key in the server's KeyRing (UTF-8), at most 255 bytes. */
  keyid?: string | Uint8Array;
  /** rs: ciphertext bytes per record but the last (default 65536). */
  recordSize?: number;
  /** 16 bytes; random by default. Never reuse a salt with a key. */
  salt?: Uint8Array;
}

export interface DecryptOptions {
  key: KeySource;
  /** Largest rs accepted (default 16 MiB); above it LimitExceededError. */
  maxRecordSize?: number;
}

export declare function generateKey(): Uint8Array;
export declare function encodeKey(key: Key): string;
export declare function decodeKey(text: string): Uint8Array;

export declare function encryptStream(options: EncryptOptions): TransformStream<Chunk, Uint8Array>;
export declare function decryptStream(options: DecryptOptions): TransformStream<Chunk, Uint8Array>;
export declare function encrypt(data: Chunk, options: EncryptOptions): Promise<Uint8Array>;
export declare function decrypt(data: Chunk, options: DecryptOptions): Promise<Uint8Array>;

export interface EncryptedFetchOptions extends RequestInit {
  /** Encrypts the request body. */
  key?: Key;
  keyid?: string | Uint8Array;
  /** Decrypts the response (default: key). */
  decryptKey?: KeySource;
  recordSize?: number;
  /** "stream": fetch upload streaming (HTTP/2+ in Chromium); "buffer" (default): a Blob. */
  upload?: "stream" | "buffer";
  onUploadProgress?: (plaintextBytes: number) => void;
  onDownloadProgress?: (plaintextBytes: number) => void;
  /** Return a response without Content-Encoding: aes128gcm instead of refusing it. */
  allowClear?: boolean;
}

export declare function encryptedFetch(
  input: RequestInfo | URL,
  options?: EncryptedFetchOptions,
): Promise<Response>;
