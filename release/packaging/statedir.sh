# The state directory (checkpoints): systemd's StateDirectory= makes it at the first start,
# made here too so that the agent also runs by hand as kafkatrail. An existing one is left as
# the administrator set it.
if [ ! -d /var/lib/kafkatrail ]; then
	install -d -m 0750 -o kafkatrail -g kafkatrail /var/lib/kafkatrail
fi
