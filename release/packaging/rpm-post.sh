# kafkatrail-agent %post: nothing is started (the configuration needs brokers and files first:
# systemctl enable --now kafkatrail-agent).
@STATEDIR@
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
