import { z } from "zod";

export const certificateSpecSchema = z.strictObject({
	name: z.string().min(1),
	domains: z.array(z.string().min(1)).min(1),
	issuer: z.string().min(1),
});
export type CertificateSpec = z.infer<typeof certificateSpecSchema>;
