// minfer --list-devices: the devices --device accepts, one line each, with what a user picks a
// device by (type, memory, the features that decide its shader paths).

#include <cstdio>

#include "backend/vulkan/vulkan_devices.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/standard_output.h"
#include "core/error.h"
#include "core/terminal_text.h"
#include "kernels/kernel_path.h"

namespace minfer::cli {

void print_devices() {
    std::string out = "Devices (--device):\n";
    out += concat("  cpu          ", escape_for_terminal(cpu_brand()), " (", kernels_in_use(),
                  "; the default)\n");
    out +=
        "  reference    plain loops in double on one thread: the oracle for checking a kernel "
        "(slow)\n";
    const VulkanDeviceList vulkan = list_vulkan_devices();
    for (const VulkanDeviceInfo& d : vulkan.devices) {
        const std::string name = concat("vulkan:", d.index);
        out += concat("  ", name, std::string(name.size() < 13 ? 13 - name.size() : 1, ' '),
                      escape_for_terminal(d.name), " (", d.type, ", ", d.api(), ", ",
                      format_mib(d.device_local_bytes), ", driver ", escape_for_terminal(d.driver),
                      d.features().empty() ? "" : "; " + d.features(), ")\n");
    }
    if (vulkan.devices.empty()) out += concat("  (no Vulkan device: ", vulkan.unavailable, ")\n");
    write_streamed(out);
}

}  // namespace minfer::cli
