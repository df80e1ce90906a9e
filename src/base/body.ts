import type { Dispatcher } from "undici";

/**
 * An HTTP answer's body as text, or undefined (and the connection dropped) as soon as it is known to pass
 * `max` bytes: from Content-Length, or while it streams. A hostile or broken server cannot make certificatee
 * hold more than `max` bytes of one answer.
 */
export async function readBodyCapped(res: Dispatcher.ResponseData, max: number): Promise<string | undefined> {
	const declared = Number(res.headers["content-length"]);
	if (Number.isFinite(declared) && declared > max) {
		res.body.destroy();
		return undefined;
	}
	const chunks: Buffer[] = [];
	let size = 0;
	for await (const chunk of res.body) {
		const buffer = chunk as Buffer;
		size += buffer.length;
		if (size > max) {
			res.body.destroy();
			return undefined;
		}
		chunks.push(buffer);
	}
	return Buffer.concat(chunks, size).toString("utf8");
}
