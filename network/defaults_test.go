package network

import (
	"testing"
	"time"
)

// TestDefaultsAreTheJavaClients pins the network layer's defaults to the Java producer's
// documented ones (ProducerConfig and CommonClientConfigs); producer.DefaultConfig reads these
// constants, so a change here changes the producer's defaults too.
func TestDefaultsAreTheJavaClients(t *testing.T) {
	for _, tc := range []struct {
		key       string
		got, want time.Duration
	}{
		{"request.timeout.ms", DefaultRequestTimeout, 30000 * time.Millisecond},
		{"connections.max.idle.ms", DefaultConnectionsMaxIdle, 540000 * time.Millisecond},
		{"reconnect.backoff.ms", DefaultReconnectBackoff, 50 * time.Millisecond},
		{"reconnect.backoff.max.ms", DefaultReconnectBackoffMax, 1000 * time.Millisecond},
		{"socket.connection.setup.timeout.ms", DefaultSocketConnectionSetupTimeout, 10000 * time.Millisecond},
		{"socket.connection.setup.timeout.max.ms", DefaultSocketConnectionSetupTimeoutMax, 30000 * time.Millisecond},
	} {
		if tc.got != tc.want {
			t.Errorf("default %s = %v, the Java client's is %v", tc.key, tc.got, tc.want)
		}
	}
	if DefaultMaxInFlight != 5 {
		t.Errorf("default max.in.flight.requests.per.connection = %d, the Java client's is 5", DefaultMaxInFlight)
	}
	// Not a Java producer setting: the broker's socket.request.max.bytes default.
	if DefaultMaxReceiveBytes != 104857600 {
		t.Errorf("default max.receive.bytes = %d, want 104857600 (socket.request.max.bytes)", DefaultMaxReceiveBytes)
	}

	// Zero fields take these defaults.
	c := Config{}.withDefaults()
	if c.RequestTimeout != DefaultRequestTimeout || c.MaxInFlight != DefaultMaxInFlight || c.MaxReceiveBytes != DefaultMaxReceiveBytes ||
		c.SocketConnectionSetupTimeoutMax != DefaultSocketConnectionSetupTimeoutMax {
		t.Errorf("Config{}.withDefaults() = %+v, want the Default constants", c)
	}
}
