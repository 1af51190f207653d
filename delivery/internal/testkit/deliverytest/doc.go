// Package deliverytest is the test support of packages delivery,
// delivery/workpulling and delivery/sharding, imported by their tests only
// (which are external test packages, so that this package may import all
// three): the test message (Job), producers and consumers that tests
// script (SpawnProducer, SpawnConsumer, Collector), systems and probes
// (NewSystem, NewProbe, Watcher), the fault link that loses, repeats and
// delays the messages between two controllers (NewFaultLink), the
// random-loss, kill -9 and benchmark harnesses, and Main, the TestMain of
// the three packages.
package deliverytest
