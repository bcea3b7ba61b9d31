# The kafkatrail system user and group the service runs as (its unit's User=): made before
# the files arrive, kept on removal (files it wrote may remain; dpkg --purge removes it).
if ! getent group kafkatrail >/dev/null; then
	groupadd --system kafkatrail
fi
if ! getent passwd kafkatrail >/dev/null; then
	# adm: Debian's and Ubuntu's /var/log files are root:adm 0640 (the unit's
	# SupplementaryGroups=adm is for the service; this is for the agent run by hand).
	groups=
	if getent group adm >/dev/null; then
		groups="--groups adm"
	fi
	# shellcheck disable=SC2086 # $groups is empty or two words
	useradd --system --gid kafkatrail $groups --home-dir /var/lib/kafkatrail --no-create-home \
		--shell /usr/sbin/nologin --comment "kafkatrail agent" kafkatrail
fi
