# The Vulkan backend's shaders: each src/backend/vulkan/shaders/NAME.comp compiled by glslc to
# SPIR-V once per variant (a weight type, as -DTYPE_X), embedded into minfer_lib
# (cmake/embed_spirv.cmake), and volk compiled in. Included from CMakeLists.txt when
# MINFER_HAVE_VULKAN.
enable_language(C)
set(MINFER_SHADER_DIR ${CMAKE_SOURCE_DIR}/src/backend/vulkan/shaders)
set(spv_files "")
set(embed_list "")
file(GLOB shader_includes ${MINFER_SHADER_DIR}/*.glsl)
# minfer_shader(NAME SOURCE [DEFINE...]): SOURCE.comp compiled with -DDEFINE... as shader NAME.
function(minfer_shader name source)
    set(spv ${CMAKE_BINARY_DIR}/shaders/${name}.spv)
    set(defines "")
    foreach(d ${ARGN})
        list(APPEND defines -D${d})
    endforeach()
    add_custom_command(OUTPUT ${spv}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/shaders
        COMMAND ${GLSLC} -fshader-stage=compute --target-env=vulkan1.2 -O -Werror ${defines}
                ${MINFER_SHADER_DIR}/${source}.comp -o ${spv}
        DEPENDS ${MINFER_SHADER_DIR}/${source}.comp ${shader_includes}
        COMMENT "glslc ${name}"
        VERBATIM)
    set(spv_files ${spv_files} ${spv} PARENT_SCOPE)
    set(embed_list "${embed_list}|${name}=${spv}" PARENT_SCOPE)
endfunction()
# The weight types the Vulkan backend reads (vulkan_backend.cpp's list; weight_types.glsl).
foreach(type F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS TQ1_0
        TQ2_0)
    string(TOLOWER ${type} t)
    string(REPLACE "_k" "_K" t ${t})  # ggml's spelling: q4_K (gguf/ggml_type.h's type_name)
    minfer_shader(matmul_vec_${t} matmul_vec TYPE_${type})
    minfer_shader(matmul_vec_moe_${t} matmul_vec TYPE_${type} MOE)
    minfer_shader(matmul_rows_${t} matmul_vec TYPE_${type} ROW_PER_INVOCATION)
    minfer_shader(matmul_rows_moe_${t} matmul_vec TYPE_${type} MOE ROW_PER_INVOCATION)
    minfer_shader(get_rows_${t} get_rows TYPE_${type})
endforeach()
minfer_shader(store_kv_f32 store_kv)
minfer_shader(store_kv_f16 store_kv F16_CACHE)
minfer_shader(store_kv_q8_0 store_kv Q8_CACHE)
minfer_shader(attention_f32 attention)
minfer_shader(attention_f16 attention F16_CACHE)
minfer_shader(attention_q8_0 attention Q8_CACHE)
minfer_shader(attention_split_f32 attention SPLIT)
minfer_shader(attention_split_f16 attention F16_CACHE SPLIT)
minfer_shader(attention_split_q8_0 attention Q8_CACHE SPLIT)
foreach(shader rms_norm elementwise rope select_rows moe_route moe_combine attention_combine)
    minfer_shader(${shader} ${shader})
endforeach()
set(MINFER_SHADERS_CPP ${CMAKE_BINARY_DIR}/generated/vulkan_shaders_spirv.cpp)
add_custom_command(OUTPUT ${MINFER_SHADERS_CPP}
    COMMAND ${CMAKE_COMMAND} -DOUT=${MINFER_SHADERS_CPP} "-DSHADERS=${embed_list}"
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_spirv.cmake
    DEPENDS ${spv_files} ${CMAKE_SOURCE_DIR}/cmake/embed_spirv.cmake
    COMMENT "Embedding the Vulkan shaders"
    VERBATIM)
add_library(minfer_volk OBJECT ${VOLK_DIR}/volk.c)
target_compile_definitions(minfer_volk PUBLIC VK_NO_PROTOTYPES)
set_target_properties(minfer_volk PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_sources(minfer_lib PRIVATE ${MINFER_SHADERS_CPP} $<TARGET_OBJECTS:minfer_volk>)
# (volk.h defines VK_NO_PROTOTYPES for every file that includes it: no flag on minfer_lib, whose
# other files then compile as without Vulkan.)
target_link_libraries(minfer_lib PUBLIC ${CMAKE_DL_LIBS})
