# kafkatrail-agent %preun: $1 is 0 on erase, 1 on upgrade. SIGTERM on erase: the agent
# flushes and saves its checkpoints before its binary goes away.
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
	systemctl --no-reload disable --now kafkatrail-agent.service || true
fi
