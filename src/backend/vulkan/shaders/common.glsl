// What every shader of the backend shares: the flat index of a workgroup dispatched as a 2-D
// grid (the host splits counts beyond the x dimension's limit into y, vulkan_ops.cpp).

uint group_index() {
    return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
}

// Invocation i of a dispatch of 64-wide workgroups laid out by group_index.
uint flat_index() {
    return group_index() * 64u + gl_LocalInvocationID.x;
}
