/**
 * What a fenced write compares: the create_revision of one key under the cluster prefix (e.g. "leader", or the
 * member's own key). The key is recreated on every new election or session, so its create_revision changes, and a
 * write carrying a stale one is refused by etcd in the same transaction.
 */
export interface Fence {
	/** Relative to the cluster prefix, e.g. "leader". */
	key: string;
	/** The key's create_revision when we created it (a decimal string: etcd revisions are int64). */
	createRevision: string;
}
