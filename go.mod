module github.com/kafkatrail/kafkatrail

go 1.26.8

require (
	github.com/go-viper/mapstructure/v2 v2.4.0
	github.com/klauspost/compress v1.20.4
	github.com/knadh/koanf/maps v0.1.2
	github.com/knadh/koanf/v2 v2.4.1
	github.com/mitchellh/copystructure v1.2.0
	github.com/mitchellh/reflectwalk v1.0.2
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	github.com/xdg-go/scram v1.4.0
	github.com/xdg-go/stringprep v1.0.4
	golang.org/x/text v0.3.8
)
