// The UserData of an instance: a `#!/bin/bash` script that cloud-init runs once, as root, at first boot.
// It stores the one-time bootstrap secret (0600), mounts the scratch volume on the agent's work dir,
// installs `berth` when configured to (npm package or tarball URL; else it is in the AMI), and starts
// `berth agent` under systemd when the image has it (restarted when it dies, except after exits 0, 2 and
// 3, which mean stopped, bad flags, node failed), else under a shell loop with the same rule.
//
// The agent reads the instance id from IMDSv2 (--imds-url) and watches it for spot interruption notices.
// Two environment variables override values baked in below, for emulators and tests only (on EC2 cloud-init
// sets neither): BERTH_IMDS_URL (the metadata service) and BERTH_WORK_DIR (a work dir per emulated
// instance, which also skips the scratch volume); BERTH_AGENT_FOREGROUND=1 runs the agent loop in the
// foreground, so that an emulator's process tree holds it.
import type { InstanceType } from '../../model/types.js';
import type { BootData } from '../boot-data.js';
import type { Ec2Config } from './config.js';

/** Quotes a string for bash (single quotes; embedded ones closed, escaped and reopened). */
export function shq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

const GiB = 1024 ** 3;

/** The scratch volume's size in GiB for a type (0: no scratch volume). */
export function scratchGiB(type: InstanceType): number {
  return type.scratch > 0 ? Math.max(1, Math.ceil(type.scratch / GiB)) : 0;
}

/** The boot script for one instance. */
export function userDataScript(cfg: Ec2Config, type: InstanceType, boot: BootData): string {
  const install = cfg.agentInstall;
  const installStep =
    install.kind === 'preinstalled'
      ? `BERTH=${shq(install.command)}`
      : [
          'command -v npm >/dev/null || fail "npm is not installed: the AMI needs Node.js >= 20 with npm (docs/AWS.md, AMI recipe)"',
          `log "installing berth from ${install.kind === 'npm' ? install.spec : install.url}"`,
          `npm install --global --no-audit --no-fund ${shq(install.kind === 'npm' ? install.spec : install.url)}`,
          'BERTH=berth',
        ].join('\n');
  const agentArgs = ['agent', '--api-url', boot.api_url, '--node-id', boot.node_id, ...cfg.agentArgs]
    .map(shq)
    .join(' ');
  return `#!/bin/bash
# Starts a Berth agent: written by Berth's ec2 driver for node ${boot.node_id} (${type.name}, ${type.providerType}).
# cloud-init runs it once, as root, at first boot. Its output is in /var/log/cloud-init-output.log.
set -eu
log() { echo "berth-boot: $*"; }
fail() { echo "berth-boot: $*" >&2; exit 1; }
IMDS_URL="\${BERTH_IMDS_URL:-${cfg.imdsUrl}}"
WORK_DIR="\${BERTH_WORK_DIR:-${cfg.workDir}}"
SCRATCH_GIB=${scratchGiB(type)}
umask 077
mkdir -p "$WORK_DIR"

# The scratch EBS volume (the disk of that size that holds no partition and no file system) becomes the
# agent's work dir, where the containers' scratch space lives.
if [ "$SCRATCH_GIB" -gt 0 ] && [ -z "\${BERTH_WORK_DIR:-}" ] && ! mountpoint -q "$WORK_DIR"; then
  disk=""
  for d in $(lsblk -dnbo NAME,TYPE,SIZE | awk -v s=$((SCRATCH_GIB * 1024 * 1024 * 1024)) '$2 == "disk" && $3 == s {print $1}'); do
    if [ -z "$(lsblk -no FSTYPE,MOUNTPOINT "/dev/$d" | tr -d '[:space:]')" ] && [ "$(lsblk -no NAME "/dev/$d" | wc -l)" -eq 1 ]; then
      disk="/dev/$d"; break
    fi
  done
  if [ -n "$disk" ]; then
    log "scratch volume $disk ($SCRATCH_GIB GiB) on $WORK_DIR"
    mkfs.ext4 -q -F "$disk"
    mount "$disk" "$WORK_DIR"
    chmod 700 "$WORK_DIR"
  else
    log "no empty $SCRATCH_GIB GiB disk found: the work dir stays on the root volume"
  fi
fi

# The one-time bootstrap secret: registration uses it up; the agent then keeps its node token here.
printf '%s' ${shq(boot.bootstrap_secret)} > "$WORK_DIR/bootstrap-secret"

${installStep}
set -- $BERTH ${agentArgs} --bootstrap-secret-file "$WORK_DIR/bootstrap-secret" --work-dir "$WORK_DIR" --imds-url "$IMDS_URL"
command -v "$1" >/dev/null || fail "$1: not found (agent_install in the ec2 config; docs/AWS.md)"
exe=$(command -v "$1"); shift
log "starting: $exe $*"

if [ -z "\${BERTH_AGENT_FOREGROUND:-}" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
  args=""
  for a in "$@"; do args="$args \\"$a\\""; done
  cat > /etc/systemd/system/berth-agent.service <<UNIT
[Unit]
Description=Berth agent (node ${boot.node_id})
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=$exe$args
Restart=on-failure
RestartSec=1
RestartPreventExitStatus=2 3
KillMode=process
# Also on the console: EC2's get-console-output shows why an agent did not come up.
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable --now berth-agent.service
  log "berth-agent.service started"
  exit 0
fi

# No systemd: a shell loop with the same restart rule.
run_agent() {
  while :; do
    rc=0; "$exe" "$@" || rc=$?
    case $rc in 0|2|3) log "agent exited $rc: not restarting"; exit "$rc";; esac
    log "agent exited $rc: restarting"; sleep 1
  done
}
if [ -n "\${BERTH_AGENT_FOREGROUND:-}" ]; then
  run_agent "$@"
else
  (trap '' HUP; run_agent "$@" >>"$WORK_DIR/agent.log" 2>&1 </dev/null) &
  log "agent started in the background (log $WORK_DIR/agent.log)"
fi
`;
}
