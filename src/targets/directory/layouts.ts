/**
 * Pure: which files a certificate becomes in each layout. No I/O; the CA PEM (from ca_file) is passed in.
 *
 * Directory naming: a target that lists exactly one certificate writes its set straight into `path`;
 * otherwise each certificate gets `<path>/<certificate name>/` (kubernetes-tls, split). haproxy-pem
 * always writes `<path>/<certificate name>.pem`.
 */
import { join } from "node:path";
import { checkFileName, type DesiredFile, type DesiredFiles } from "../../atomicdir/index.js";
import { combinedPem } from "../../certificates/bundle.js";
import { encodePem, splitPem } from "../../certificates/pem.js";
import type { Bundle } from "../../certificates/types.js";
import type { DesiredCertificate } from "../../reconcile/model.js";
import type { DirectoryTargetConfig } from "./schema.js";

export const KEY_MODE = 0o600;

/** A certificate's files: a directory swapped as one set, or one file replaced on its own. */
export type FileSet =
	| { kind: "directory"; certificate: string; path: string; files: DesiredFiles }
	| { kind: "file"; certificate: string; path: string; file: DesiredFile };

export type LayoutConfig = Pick<DirectoryTargetConfig, "layout" | "path" | "certificates" | "file_mode">;

/** Throws ATOMICDIR_BAD_NAME when the certificate name is not a plain file name (it names a file or dir). */
export function fileSetFor(cert: DesiredCertificate, config: LayoutConfig, caPem?: string): FileSet {
	const { bundle, name } = cert;
	checkFileName(config.layout === "haproxy-pem" ? `${name}.pem` : name, config.path);
	const pub = (content: string): DesiredFile => ({ content, mode: config.file_mode });
	const key: DesiredFile = { content: bundle.key.reveal(), mode: KEY_MODE };
	switch (config.layout) {
		case "haproxy-pem":
			return {
				kind: "file",
				certificate: name,
				path: join(config.path, `${name}.pem`),
				file: { content: combinedPem(bundle), mode: KEY_MODE },
			};
		case "kubernetes-tls": {
			const ca = caPem ?? rootOf(bundle);
			const files: Record<string, DesiredFile> = { "tls.crt": pub(bundle.fullchainPem), "tls.key": key };
			if (ca !== undefined) files["ca.crt"] = pub(ca);
			return { kind: "directory", certificate: name, path: setDirectory(name, config), files };
		}
		case "split":
			return {
				kind: "directory",
				certificate: name,
				path: setDirectory(name, config),
				files: {
					"cert.pem": pub(bundle.certPem),
					"chain.pem": pub(bundle.chainPem),
					"fullchain.pem": pub(bundle.fullchainPem),
					"privkey.pem": key,
				},
			};
	}
}

/** The file of a set whose first certificate is its leaf: what the set serves now, read back to compare. */
export function leafFileOf(set: FileSet): string {
	if (set.kind === "file") return set.path;
	return join(set.path, "tls.crt" in set.files ? "tls.crt" : "cert.pem");
}

/** `path` itself when the target lists exactly one certificate, else `<path>/<name>`. */
export function setDirectory(name: string, config: Pick<LayoutConfig, "path" | "certificates">): string {
	return config.certificates?.length === 1 ? config.path : join(config.path, name);
}

/** The chain's last certificate when it is a self-signed CA (a root shipped with the chain). */
export function rootOf(bundle: Bundle): string | undefined {
	const last = bundle.chain.at(-1);
	if (last === undefined || !last.isCa || last.subject !== last.issuer) return undefined;
	const split = splitPem(bundle.chainPem);
	const block = split.ok ? split.blocks.at(-1) : undefined;
	return block === undefined ? undefined : encodePem("CERTIFICATE", block.der);
}
