# kafkatrail-agent %postun: $1 is 0 on erase, 1 on upgrade. The user, /etc/kafkatrail (a
# changed agent.yaml is kept as .rpmsave) and /var/lib/kafkatrail stay: RPM has no purge.
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	if [ "$1" -ge 1 ]; then
		systemctl try-restart kafkatrail-agent.service || true
	fi
fi
