package keyspace

import (
	"fmt"
	"strings"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot returns the cluster slot of key: the CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384 — the rule of
// the Redis Cluster specification. (go-redis computes the same, but only
// in an internal package.)
func Slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), bit by bit: keys
// are short, and a table would be 512 bytes of constants to check.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// SpreadTags returns n hash tags, one per part of something split n ways
// (timer partitions), whose slots are spread evenly over the 16384: tag i
// is the first of "<name>.<i>.0", "<name>.<i>.1", … whose slot is in the
// i-th of n equal ranges of slots. A cluster made by redis-cli --cluster
// create gives each master an equal contiguous range, so the n parts
// spread over the masters as evenly as n allows, instead of as chance
// falls. The result depends only on name and n: every instance computes
// the same tags. n must be in [1, 16384].
func SpreadTags(name string, n int) []string {
	if n < 1 || n > Slots {
		panic(fmt.Sprintf("keyspace.SpreadTags: %d parts; want 1 to %d", n, Slots))
	}
	tags := make([]string, n)
	for i := range n {
		lo, hi := i*Slots/n, (i+1)*Slots/n
		for k := 0; ; k++ {
			tag := fmt.Sprintf("%s.%d.%d", name, i, k)
			if s := Slot(tag); lo <= s && s < hi {
				tags[i] = tag
				break
			}
		}
	}
	return tags
}
