package node

import "context"

// ClaimHolder is this instance's name in the Idempotency-Key claims its
// requests make: its member id, the same across its rejoins and new in
// every process.
func (n *Node) ClaimHolder() string { return n.id }

// HolderGone reports whether the instance a claim names (its
// ClaimHolder) is gone: no live member of the cluster has that id, since
// its lease lapsed or it left. Without a membership of its own, or when
// the members cannot be read, this instance cannot tell, and says not.
func (n *Node) HolderGone(ctx context.Context, holder string) bool {
	m := n.view.cur.Load()
	if m == nil {
		return false
	}
	members, err := m.member.Members(ctx)
	if err != nil {
		return false
	}
	for _, mi := range members {
		if mi.ID == holder {
			return false
		}
	}
	return true
}
