/**
 * A target made of HAProxy endpoints (the Data Plane API fleet, or one runtime-socket node): runs the
 * three phases on every endpoint with bounded concurrency; one endpoint's failure never stops the others.
 */
import pLimit from "p-limit";
import type { DuplicatePolicy } from "../reconcile/classify.js";
import type { CycleMode, TargetRunner } from "../reconcile/cycle.js";
import { selectCertificates } from "../reconcile/cycle.js";
import { processEndpoint } from "../reconcile/endpoint.js";
import type { DesiredCertificate, EndpointDriver } from "../reconcile/model.js";
import type { TargetReport } from "../reconcile/report.js";
import { canonicalRef } from "./naming.js";

export interface FleetOptions {
	name: string;
	kind: string;
	endpoints: readonly EndpointDriver[];
	policy: DuplicatePolicy;
	/** The directory HAProxy loads storage files from, as HAProxy names them. */
	storageDir: string;
	/** Where new certificates are made live at runtime (a crt-list, or the crt directory). */
	newCertificateCrtList?: string;
	certificates?: readonly string[];
	/** Endpoints processed at once (default 16). */
	concurrency?: number;
	now: () => Date;
}

export function createFleetRunner(options: FleetOptions): TargetRunner {
	return {
		name: options.name,
		kind: options.kind,
		async run(
			all: readonly DesiredCertificate[],
			mode: CycleMode,
			signal: AbortSignal,
		): Promise<TargetReport> {
			const desired = selectCertificates(all, options.certificates).map((certificate) => ({
				ref: canonicalRef(certificate.name),
				certificate,
			}));
			const limit = pLimit(options.concurrency ?? 16);
			const endpoints = await Promise.all(
				options.endpoints.map((driver) =>
					limit(() =>
						processEndpoint({
							target: options.name,
							driver,
							desired,
							policy: options.policy,
							storageDir: options.storageDir,
							...(options.newCertificateCrtList
								? { newCertificateCrtList: options.newCertificateCrtList }
								: {}),
							mode,
							signal,
							now: options.now,
						}),
					),
				),
			);
			return { target: options.name, kind: options.kind, endpoints };
		},
	};
}
