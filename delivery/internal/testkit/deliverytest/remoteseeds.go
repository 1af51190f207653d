package deliverytest

import (
	"flag"
	"time"
)

var (
	flagRemoteSeeds = flag.Int("delivery.remoteseeds", 20, "seeds per case of the tests across instances (1000 for a long run)")
	flagRemoteSeed  = flag.Uint64("delivery.remoteseed", 0, "run the cases across instances with this seed only")
)

// RemoteSeeds are the seeds of a case across instances: the one of
// -delivery.remoteseed, or -delivery.remoteseeds of them.
func RemoteSeeds() []uint64 {
	if *flagRemoteSeed != 0 {
		return []uint64{*flagRemoteSeed}
	}
	base := uint64(time.Now().UnixNano())
	seeds := make([]uint64, 0, *flagRemoteSeeds)
	for i := range *flagRemoteSeeds {
		seeds = append(seeds, base+uint64(i)*0x9e3779b97f4a7c15)
	}
	return seeds
}
