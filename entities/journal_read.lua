-- journal_read: an event-sourced entity's head and the events after its
-- snapshot, read in one step (JournalStore.ReadJournal).
-- KEYS[1] the head hash, KEYS[2] the events stream (journal_append.lua).
-- Returns {{seq, del, snap, snapseq, snapat}, entries}.
local h = redis.call('HMGET', KEYS[1], 'seq', 'del', 'snap', 'snapseq', 'snapat')
local from = '-'
if h[4] then from = '(' .. h[4] .. '-0' end
return {h, redis.call('XRANGE', KEYS[2], from, '+')}
