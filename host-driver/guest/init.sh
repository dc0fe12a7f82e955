#!/bin/busybox sh
# /init of the VFIO test guest (tests/vfio_qemu.rs builds the initramfs around it).
#
# Loads the vfio modules listed in /etc/modules (dependency order, computed on the host from
# each module's `depends=`), binds the QEMU edu device (PCI 1234:11e8) to vfio-pci the way
# `mrcctl bind` does, runs /vfio_edu with the nonce from the kernel command line
# (`mrc_nonce=<hex>`) and powers off. Everything goes to the serial console; the host reads
# `NONCE=... HASH=...` from it, and `MRC_GUEST_FAIL: ...` names what went wrong.
/bin/busybox --install -s /bin
export PATH=/bin

fail() {
    echo "MRC_GUEST_FAIL: $*"
    poweroff -f
    sleep 5
    exit 1
}

mount -t proc proc /proc || fail "mount /proc"
mount -t sysfs sysfs /sys || fail "mount /sys"
mount -t devtmpfs devtmpfs /dev || fail "mount /dev"

nonce=""
for arg in $(cat /proc/cmdline); do
    case "$arg" in
    mrc_nonce=*) nonce="${arg#mrc_nonce=}" ;;
    esac
done
[ -n "$nonce" ] || fail "no mrc_nonce= on the kernel command line"

while read -r module; do
    insmod "/lib/modules/$module" || fail "insmod $module"
done </etc/modules

# vfio_bind BDF: what `mrcctl bind BDF` does through sysfs.
#  1. the device must be in an IOMMU group (else the IOMMU is off: intel_iommu=on);
#  2. driver_override = vfio-pci, so no other driver claims it from now on;
#  3. unbind it from its current driver, if any;
#  4. drivers_probe: the PCI core now matches it against vfio-pci only;
#  5. check it landed on vfio-pci and /dev/vfio/<group> exists.
vfio_bind() {
    dev="/sys/bus/pci/devices/$1"
    [ -d "$dev" ] || fail "vfio_bind: no PCI device $1"
    [ -e "$dev/iommu_group" ] || fail "vfio_bind: $1 has no IOMMU group (is intel_iommu=on?)"
    group=$(basename "$(readlink "$dev/iommu_group")")
    echo vfio-pci >"$dev/driver_override" || fail "vfio_bind: driver_override of $1"
    if [ -e "$dev/driver" ]; then
        echo "$1" >"$dev/driver/unbind" || fail "vfio_bind: unbind $1"
    fi
    echo "$1" >/sys/bus/pci/drivers_probe || fail "vfio_bind: drivers_probe of $1"
    driver=$(basename "$(readlink "$dev/driver")")
    [ "$driver" = vfio-pci ] || fail "vfio_bind: $1 is on driver '$driver', not vfio-pci"
    [ -c "/dev/vfio/$group" ] || fail "vfio_bind: /dev/vfio/$group is missing"
    echo "vfio_bind: $1 on vfio-pci, IOMMU group $group"
}

bdf=""
for dev in /sys/bus/pci/devices/*; do
    if [ "$(cat "$dev/vendor")" = 0x1234 ] && [ "$(cat "$dev/device")" = 0x11e8 ]; then
        bdf=$(basename "$dev")
    fi
done
[ -n "$bdf" ] || fail "no edu device (1234:11e8) on the PCI bus"

vfio_bind "$bdf"
/vfio_edu "$bdf" "$nonce" || fail "vfio_edu exited with status $?"
# The IOMMU's fault reports (vfio_edu's DMA to an unmapped IOVA must be one of them).
dmesg | grep "DMAR:.*fault addr"
echo "MRC_GUEST_DONE"
poweroff -f
